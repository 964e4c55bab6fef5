/** `handoff-ledger demo [--root DIR] [--host ID]`: runs the end-to-end demo on the embedded store. */
import { runDemo } from './demo-scenario.js';
import { defaultRoot } from '../ledger/open.js';
import { EXIT_OK, parse, reportError, type CliIo } from './io.js';

/** @returns 0 when every step ran and every check held; 1 on a refused ledger operation; 2 otherwise */
export async function run(argv: string[], io: CliIo): Promise<number> {
  try {
    const { values } = parse(argv, { root: { type: 'string' }, host: { type: 'string' } });
    await runDemo({ root: values.root ?? defaultRoot(io.env), host: values.host ?? 'demo-host', out: io.stdout });
    return EXIT_OK;
  } catch (err) {
    return reportError(err, io);
  }
}
