/** The steps benchmarks/large-steps.ts times, in its table's order (its smoke test expects each one). */
export const LARGE_STEP_CASES = [
  'raw durable write',
  'raw durable write (flush-behind)',
  'put, bytes',
  'put, stream',
  'publish',
  'publish, inline (2 KB)',
  'CPU: validate (prepareSummary)',
  'CPU: encode (all pieces)',
  'CPU: native BLAKE3 here',
] as const;
