import { Writable } from 'node:stream';

/** The line after a refusal of a command line of the wrong shape (an unknown option, a missing one, …). */
export const helpHint = (command: string) => `Try 'handoff-ledger help ${command}' for its options.\n`;

/** CLI I/O captured in memory; `tty` marks stderr as a terminal (for the progress bar). */
export function captureIo(o: { tty?: boolean; env?: NodeJS.ProcessEnv } = {}) {
  const chunks = { stdout: [] as string[], stderr: [] as string[] };
  const sink = (into: string[]) =>
    new Writable({
      write(chunk, _enc, done) {
        into.push(String(chunk));
        done();
      },
    });
  const stderr = sink(chunks.stderr) as Writable & { isTTY?: boolean };
  if (o.tty) stderr.isTTY = true;
  return {
    io: { stdout: sink(chunks.stdout), stderr, env: o.env ?? {} },
    stdout: () => chunks.stdout.join(''),
    stderr: () => chunks.stderr.join(''),
  };
}
