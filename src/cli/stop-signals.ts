/**
 * SIGINT / SIGTERM as an AbortSignal, for the commands that stop cleanly when interrupted (`export`, `gc`): the
 * operation ends `CANCELLED` at its next safe point and the command exits as the shell reports a process the signal
 * ended. The first signal of either kind takes both handlers off (`onStopSignal`): a second one, of either kind, ends
 * the process at once, as it would without them, however long the stopping takes.
 */
import { onStopSignal, type StopSignal } from './io.js';

export type { StopSignal } from './io.js';

/** The shell's exit code for a process ended by a signal: 128 + its number. */
export const SIGNAL_EXITS: Readonly<Record<StopSignal, number>> = { SIGINT: 130, SIGTERM: 143 };

export interface StopSignals {
  /** Aborted by the first SIGINT or SIGTERM (its reason: `<command> interrupted by <SIGNAL>`). */
  signal: AbortSignal;
  /** The signal that came, if any. */
  stoppedBy(): StopSignal | undefined;
  /** Takes the handlers off again (call once the operation has settled). */
  dispose(): void;
}

/** Listens for SIGINT and SIGTERM until `dispose()`; `command` names the command in the abort's reason. */
export function stopSignals(command: string): StopSignals {
  const controller = new AbortController();
  let stoppedBy: StopSignal | undefined;
  const dispose = onStopSignal((signal) => {
    stoppedBy = signal;
    controller.abort(new Error(`${command} interrupted by ${signal}`));
  });
  return { signal: controller.signal, stoppedBy: () => stoppedBy, dispose };
}
