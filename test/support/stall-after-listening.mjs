// Preloaded (`node --import`) into a `witness serve` or `audit-ui` child: once the child has printed the line a caller
// waits for ("listening on …" / "audit-ui: http://…"), the main thread stalls for STALL_AFTER_LISTENING_MS (default
// 500) before it goes on, as a loaded machine may deschedule it right after that write. A signal the caller sends on
// reading the line lands in that stall: it must find the command's listener already there (a clean stop, exit 0),
// not the default disposition (death by the signal).
const stallMs = Number(process.env.STALL_AFTER_LISTENING_MS ?? 500);
const write = process.stdout.write.bind(process.stdout);
process.stdout.write = (chunk, ...rest) => {
  const done = write(chunk, ...rest);
  if (/listening on |audit-ui: http/.test(String(chunk))) {
    const until = Date.now() + stallMs;
    while (Date.now() < until);
  }
  return done;
};
