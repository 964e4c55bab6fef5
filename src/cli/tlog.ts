/** checkpoint, prove: the transparency-log view of the store (C2SP checkpoints, RFC 6962 proofs). */
import { parseManifestId } from '../ledger/proofs.js';
import { printableExact, quoted } from '../../manifests/encoding/printable.js';
import {
  EXIT_OK,
  parse,
  reportError,
  storeOptions,
  CommandLineError,
  wholeNumber,
  withLedger,
  witnessingFromEnv,
  writeJson,
  type CliIo,
} from './io.js';

/**
 * checkpoint [--witness URL]…: prints the signed note exactly (it is what tlog tools and witnesses verify
 * byte for byte), with the cosignatures of the witnesses that answered in time, unless it carries characters a
 * terminal acts on (an origin from a tampered store): then escaped.
 */
export async function checkpoint(argv: string[], io: CliIo): Promise<number> {
  const { values } = parse(argv, { ...storeOptions, witness: { type: 'string', multiple: true } });
  try {
    // HANDOFF_LEDGER_WITNESSES and --witness, with HANDOFF_LEDGER_WITNESS_TIMEOUT_MS as every command takes it.
    const extra = witnessingFromEnv(io.env, values.witness ?? []);
    return await withLedger(
      values,
      io,
      'checkpoint',
      async (ledger) => {
        const { note, checkpoint: cp } = await ledger.checkpoint();
        if (values.json) writeJson(io.stdout, { origin: cp.origin, size: cp.size, note });
        else io.stdout.write(printableExact(note));
        return EXIT_OK;
      },
      extra,
    );
  } catch (err) {
    return reportError(err, io, values.json);
  }
}

/**
 * A tree size the operator gives `prove` (`--size`, OLD-SIZE), read as every number of the CLI is (`wholeNumber`),
 * 0 to 2^53 − 1; the ledger then holds it to the tree (INVALID_ARGUMENT). Before, a leading zero was refused here as
 * a checkpoint's text refuses it (C2SP: a note's size is written without one), but an argument is not a note: `05`
 * is 5 to this command as to every other, and the old pattern took 16 digits, past 2^53 − 1, where a size was
 * rounded to another (9999999999999999 read as 10000000000000000) instead of refused.
 */
function size(text: string | undefined, what: string): number | undefined {
  return text === undefined ? undefined : wholeNumber(text, what, 0, Number.MAX_SAFE_INTEGER, 'entries');
}

/** prove inclusion MANIFEST-ID [--size N] | prove consistency OLD-SIZE [--size N] */
export async function prove(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parse(argv, { ...storeOptions, size: { type: 'string' } }, true);
  try {
    const [kind, arg] = positionals;
    // Each refusal names what is wrong (no subcommand, an unknown one, its argument missing, one too many), then
    // the usage: "usage: …" alone left a typo such as `prove incl` to be found by eye. Each a command line of the wrong
    // shape, which points to the command's help.
    const proveUsage = 'usage: prove inclusion MANIFEST-ID [--size N] | prove consistency OLD-SIZE [--size N]';
    if (kind === undefined) throw new CommandLineError(`prove needs a subcommand; ${proveUsage}`);
    if (kind !== 'inclusion' && kind !== 'consistency')
      throw new CommandLineError(`unknown prove subcommand ${quoted(kind)}; ${proveUsage}`);
    if (arg === undefined)
      throw new CommandLineError(
        `prove ${kind} needs ${kind === 'inclusion' ? 'a MANIFEST-ID' : 'an OLD-SIZE'}; ${proveUsage}`,
      );
    if (positionals.length > 2)
      throw new CommandLineError(`unexpected argument ${quoted(positionals[2]!)}; ${proveUsage}`);
    const treeSize = size(values.size, '--size');
    const oldSize = kind === 'consistency' ? size(arg, 'OLD-SIZE') : undefined;
    // A malformed id is the ledger's refusal, INVALID_ID (exit 1), as for every id a command on a store is given;
    // judged before the store is opened, as publish judges its ids.
    const id = kind === 'inclusion' ? parseManifestId(arg) : undefined;
    return await withLedger(values, io, `prove ${kind}`, async (ledger) => {
      const proof =
        id !== undefined
          ? await ledger.inclusionProof(id, { size: treeSize })
          : await ledger.consistencyProof(oldSize!, { size: treeSize });
      writeJson(io.stdout, proof);
      return EXIT_OK;
    });
  } catch (err) {
    return reportError(err, io, values.json);
  }
}
