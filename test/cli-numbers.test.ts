/**
 * One reading of a number the operator writes, whichever takes it: publish's `--max-bytes` and audit-ui's `--port`,
 * HANDOFF_LEDGER_WITNESS_TIMEOUT_MS (every command's witnessing), witness serve's `--max-body-bytes`,
 * `--request-timeout-ms` and `--listen`'s PORT, prove's `--size` and OLD-SIZE, verify's `--workers`, and the auditor's
 * `--max-bundle-bytes` and `--quorum` (read in manifests/audit/, the page's code too, through the same core,
 * manifests/encoding/whole-number.ts). The same text is a number, or not, for all of them (ASCII decimal digits, a
 * leading zero included, a safe integer); each keeps its own range; a refusal is USAGE naming the option or variable,
 * what it counts, its range and the text given. Before, witness serve refused `05` that the others took as 5, and its
 * messages and `--max-bytes`' / `--port`'s named neither the range in the same words nor the text given; prove refused
 * `05` and rounded 9999999999999999 to another size, `--quorum` refused `05` and 10000, `--workers` `0005`,
 * `--listen` `:000080`, each in words of its own.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { witnessingFromEnv } from '../src/cli/io.js';
import { captureIo } from './support/capture-io.js';
import { tempDir } from './support/tmp.js';

const SAFE = Number.MAX_SAFE_INTEGER;
const TIMER = 2 ** 31 - 1;

/** Each text and the number it is (undefined: no number, for every caller). */
const TABLE: [string, number | undefined][] = [
  [' 5', undefined],
  ['5 ', undefined],
  ['+5', undefined],
  ['-0', undefined],
  ['-5', undefined],
  ['5.0', undefined],
  ['1e3', undefined],
  ['0x10', undefined],
  ['0b1', undefined],
  ['Infinity', undefined],
  ['٥', undefined], // an Arabic-Indic five: a digit to Unicode, not to us
  ['five', undefined],
  ['05', 5],
  ['0005', 5],
  ['0', 0],
  ['1', 1],
  ['65535', 65535],
  ['65536', 65536],
  [String(TIMER), TIMER],
  [String(TIMER + 1), TIMER + 1],
  [String(SAFE), SAFE],
  [String(SAFE + 1), undefined], // 9007199254740992: past the integers a double holds exactly
  ['99999999999999999999', undefined],
  ['1' + '0'.repeat(400), undefined],
];

interface Caller {
  name: string;
  min: number;
  max: number;
  unit?: string;
  /** A word it takes beside the numbers (`auto`). */
  or?: string;
  /** An option: an empty value is refused as every option's is (`--NAME must not be empty`). */
  option?: true;
  /** The number the caller took, or the USAGE message it refused the text with. */
  read: (text: string) => Promise<{ took: number } | { refused: string }>;
}

const usageOf = (code: number, stderr: string) => {
  expect(code, stderr).toBe(2);
  // A refusal of the line's shape (an empty value) is followed by where the command's options are listed.
  const m = /^handoff-ledger: USAGE: (.*)\n(?:Try 'handoff-ledger help [a-z-]+' for its options\.\n)?$/.exec(stderr);
  expect(m, stderr).not.toBeNull();
  return m![1]!;
};

const dir = tempDir();
const missing = join(dir, 'missing');

/** Runs the CLI in-process; a run that got past the number is told by the refusal that comes next. */
async function cli(
  argv: string[],
  next: string,
  env?: NodeJS.ProcessEnv,
): Promise<{ took: true } | { refused: string }> {
  const c = captureIo({ env });
  const code = await main(argv, c.io);
  const message = usageOf(code, c.stderr());
  return message.startsWith(next) ? { took: true } : { refused: message };
}

/** `cli`, the text taken as the number it is. */
const number = async (text: string, ...args: Parameters<typeof cli>) => {
  const r = await cli(...args);
  return 'took' in r ? { took: Number(text) } : r;
};

const callers: Caller[] = [
  {
    name: '--max-bytes',
    option: true,
    min: 1,
    max: SAFE,
    unit: 'bytes',
    // Two FILEs: refused right after --max-bytes is read, before any store is opened.
    read: async (text) => {
      const r = await cli(
        [
          'publish',
          '--root',
          missing,
          '--principal',
          'a',
          '--session',
          's',
          '--run',
          'r',
          `--max-bytes=${text}`,
          'x',
          'y',
        ],
        'publish takes at most one FILE',
      );
      return 'took' in r ? { took: Number(text) } : r;
    },
  },
  {
    name: '--port',
    option: true,
    min: 0,
    max: 65535,
    // A bad --expect: refused right after --port is read, before anything listens.
    read: async (text) => {
      const r = await cli(['audit-ui', `--port=${text}`, '--expect', 'nothing'], '--expect must be');
      return 'took' in r ? { took: Number(text) } : r;
    },
  },
  {
    name: 'HANDOFF_LEDGER_WITNESS_TIMEOUT_MS',
    min: 1,
    max: TIMER,
    unit: 'milliseconds',
    read: async (text) => {
      try {
        const env = { HANDOFF_LEDGER_WITNESSES: 'http://w.example', HANDOFF_LEDGER_WITNESS_TIMEOUT_MS: text };
        return { took: witnessingFromEnv(env).witnesses!.timeoutMs! };
      } catch (err) {
        return { refused: (err as Error).message };
      }
    },
  },
  ...(
    [
      ['--max-body-bytes', SAFE, 'bytes'],
      ['--request-timeout-ms', TIMER, 'milliseconds'],
    ] as const
  ).map(([name, max, unit]) => ({
    name,
    option: true as const,
    min: 1,
    max,
    unit,
    // A key file that is not there: refused right after the numbers are read, before anything listens.
    read: async (text: string) => {
      const serve = ['witness', 'serve', '--listen', '127.0.0.1:0', '--key', missing, '--logs', missing];
      const r = await cli([...serve, '--state', join(dir, 'state'), `${name}=${text}`], `--key "${missing}":`);
      return 'took' in r ? { took: Number(text) } : r;
    },
  })),
  {
    name: "--listen's PORT",
    min: 0,
    max: 65535,
    read: (text) =>
      number(
        text,
        ['witness', 'serve', `--listen=127.0.0.1:${text}`, '--key', missing, '--logs', missing, '--state', missing],
        `--key "${missing}":`,
      ),
  },
  {
    name: '--size',
    option: true,
    min: 0,
    max: SAFE,
    unit: 'entries',
    // An OLD-SIZE that is no number: refused right after --size is read.
    read: (text) =>
      number(text, ['prove', 'consistency', 'old', '--root', missing, `--size=${text}`], 'OLD-SIZE must be'),
  },
  {
    name: 'OLD-SIZE',
    min: 0,
    max: SAFE,
    unit: 'entries',
    // A hash backend that does not exist: refused as the store is about to be opened, once the sizes are read.
    read: (text) =>
      number(text, ['prove', 'consistency', '--root', missing, '--', text], 'HANDOFF_LEDGER_HASH must be', {
        HANDOFF_LEDGER_HASH: 'none',
      }),
  },
  {
    name: '--workers',
    option: true,
    or: 'auto',
    min: 0,
    max: 256,
    // A bad --expect: refused right after --workers is read, before any file.
    read: (text) =>
      number(
        text,
        ['verify', missing, '--trust', missing, `--workers=${text}`, '--expect', 'nothing'],
        '--expect must be',
      ),
  },
  {
    name: '--max-bundle-bytes',
    option: true,
    min: 1,
    max: SAFE,
    unit: 'bytes',
    // An earlier checkpoint that is not there: read right after the bound.
    read: (text) =>
      number(text, ['audit-ui', `--max-bundle-bytes=${text}`, '--since', missing], `--since "${missing}"`),
  },
  {
    name: '--quorum',
    option: true,
    min: 1,
    max: SAFE,
    // A witness keys file that is not there: read once the quorum is (its upper bound, the pinned keys, then).
    read: (text) =>
      number(text, ['audit-ui', '--witness-keys', missing, `--quorum=${text}`], `--witness-keys "${missing}"`),
  },
];

describe('numbers the operator writes', () => {
  for (const caller of callers)
    it(`${caller.name}: the same texts are numbers, within its own range (${caller.min} to ${caller.max})`, async () => {
      const refusal = (text: string) =>
        `${caller.name} must be ${caller.or ? `${caller.or} or ` : ''}a whole number${caller.unit ? ` of ${caller.unit}` : ''} from ${caller.min} to ${caller.max}, not ${JSON.stringify(text.slice(0, 40))}${text.length > 40 ? '…' : ''}`;
      for (const [text, value] of TABLE) {
        const inRange = value !== undefined && value >= caller.min && value <= caller.max;
        expect(await caller.read(text), `${caller.name} ${JSON.stringify(text)}`).toEqual(
          inRange ? { took: value } : { refused: refusal(text) },
        );
      }
    });

  it('an empty value is a usage error for an option and unset for the variable (the default), as README says', async () => {
    for (const caller of callers.filter((c) => c.option))
      expect(await caller.read(''), caller.name).toEqual({ refused: `${caller.name} must not be empty` });
    expect(
      witnessingFromEnv({ HANDOFF_LEDGER_WITNESSES: 'http://w.example', HANDOFF_LEDGER_WITNESS_TIMEOUT_MS: '' }),
    ).toEqual({ witnesses: { witnesses: ['http://w.example'] } });
  });

  it('a refused text is escaped in the message, as all data is', async () => {
    const c = captureIo();
    expect(
      await main(
        [
          'witness',
          'serve',
          '--listen',
          '127.0.0.1:0',
          '--key',
          missing,
          '--logs',
          missing,
          '--state',
          missing,
          '--max-body-bytes=\x1b[31m',
        ],
        c.io,
      ),
    ).toBe(2);
    expect(c.stderr()).toBe(
      `handoff-ledger: USAGE: --max-body-bytes must be a whole number of bytes from 1 to ${SAFE}, not "\\u001b[31m"\n`,
    );
    expect(c.stderr()).not.toContain('\x1b');
  });
});
