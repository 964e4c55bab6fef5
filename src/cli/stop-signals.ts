/**
 * SIGINT / SIGTERM as an AbortSignal, for the commands that stop cleanly when interrupted: every command on a store
 * while it opens the store (io.ts `openFromArgs`), and `export`, `gc` and `publish` after it too (`publish` before it
 * as well, while it waits for or reads its summary: core.ts `readSummary`); `demo` throughout
 * (demo.ts: its opens, its compactions' publishes, between its steps). The operation ends
 * `CANCELLED` at its next safe point and the command exits as the shell reports a process the signal ended. The first
 * signal of either kind takes both handlers off (`onStopSignal`): a second one, of either kind, ends the process at
 * once, as it would without them, however long the stopping takes. (Defined in io.ts, whose opener listens too.)
 */
export { SIGNAL_EXITS, stopSignals } from './io.js';
export type { StopSignal, StopSignals } from './io.js';
