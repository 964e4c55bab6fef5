/** Shared by the crash child and its parent: the parent rebuilds each acknowledged summary to check it. */

export const SESSIONS = 6;

/** The summary published under `marker`, about `size` bytes long in canonical form. */
export function crashSummary(marker, size) {
  const unit = `${marker}|`;
  const pad = Math.max(0, size - 110 - marker.length);
  return {
    task: `crash ${marker}`,
    state: 'in progress',
    nextSteps: ['continue'],
    notes: unit.repeat(Math.ceil(pad / unit.length)).slice(0, pad),
  };
}
