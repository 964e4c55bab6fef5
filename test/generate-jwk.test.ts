/**
 * generateJwk never hangs. Made with Node's generateKeyPairSync('ed25519') and a JWK export of the key object, it
 * deadlocked now and then (Node 20): a garbage collection during the export destroyed the job that generated the key,
 * and that job's destructor waited for the lock the export held, for ever (`witness keygen` and `init` hung, printing
 * nothing). In a process whose young generation is kept at 1 MiB, so that it collects all the time, the old code hung
 * once in some ten thousand keys: two such processes of 25,000 keys each, side by side, were hung in nearly every run.
 */
import { execFile } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const KEYS = 25_000;

/** A process that makes KEYS keys, then loads and signs with one more; killed when it has not ended in 45 s. */
function makeKeys(): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }> {
  const url = pathToFileURL(join(ROOT, 'dist/src/index.js')).href;
  const script = `
    const { generateJwk, LocalSigner } = await import(${JSON.stringify(url)});
    const kids = new Set();
    for (let i = 0; i < ${KEYS}; i++) kids.add(generateJwk().kid);
    // What it makes is a key: loaded (its x checked against its d), it signs.
    const signer = new LocalSigner(generateJwk());
    console.log(JSON.stringify([kids.size, signer.sign(new Uint8Array([1])).length]));`;
  return new Promise((done) => {
    execFile(
      process.execPath,
      ['--max-semi-space-size=1', '--input-type=module', '-e', script],
      { encoding: 'utf8', timeout: 45_000, killSignal: 'SIGKILL' },
      (err, stdout, stderr) =>
        done({
          code: err ? (typeof err.code === 'number' ? err.code : null) : 0,
          signal: err?.signal ?? null,
          stdout,
          stderr,
        }),
    );
  });
}

it(`makes ${KEYS} distinct keys, twice at once, in processes that collect garbage all the time, without hanging`, async () => {
  const runs = await Promise.all([makeKeys(), makeKeys()]);
  // A hung process is killed at its timeout: code null, signal SIGKILL, nothing printed.
  for (const run of runs)
    expect(run).toEqual({ code: 0, signal: null, stdout: `${JSON.stringify([KEYS, 64])}\n`, stderr: '' });
}, 60_000);
