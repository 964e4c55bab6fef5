// Preloaded (`node --import`) into a CLI child by test/witness/close-submits.test.ts: writes `stop signals released`
// to stderr once the command has taken its last SIGTERM listener off (publish does so once its receipt is out). From
// then on a SIGTERM ends the process as it would without a handler; one sent before (while the CLI still listens, or
// in the moment between its receipt and the removal, when a loaded machine can hold the child for long) is heard or
// lost, and the publish exits 0 after the close's wait for its witnesses.
const removeListener = process.removeListener;
const released = function (event, listener) {
  const had = process.listenerCount(event);
  const result = removeListener.call(this, event, listener);
  // Written synchronously (stderr is a pipe), after Node has stopped listening for the signal.
  if (event === 'SIGTERM' && had > 0 && process.listenerCount(event) === 0)
    process.stderr.write('stop signals released\n');
  return result;
};
process.removeListener = released;
process.off = released;
