/** The package's own version, read from its package.json: one source of truth for `--version` and telemetry. */
import { readFileSync } from 'node:fs';

/** Where package.json is from this module: beside src/ when run from source, two up from dist/src/ when built. */
const CANDIDATES = ['../package.json', '../../package.json'];

let cached: string | undefined;

export function packageVersion(): string {
  if (cached) return cached;
  for (const rel of CANDIDATES) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'handoff-ledger' && typeof pkg.version === 'string') return (cached = pkg.version);
    } catch {}
  }
  return (cached = '0.0.0-unknown');
}
