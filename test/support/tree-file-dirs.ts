/**
 * Bundles with a directory where a tree file belongs, as `verify` judges them only when it reads that file
 * (test/error-codes-doc.test.ts, for the README's BUNDLE_INVALID row; test/web/picked-reader.test.ts, for the page):
 * a ledger with one manifest (principal `p`, session `s`) exported whole (`full`: a directory at its heads.jsonl and
 * proofs.jsonl, which a full bundle does not read) and filtered to session `s` (`filtered`: a directory in place of its
 * heads.jsonl, which it reads).
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { main } from '../../src/cli/main.js';
import { openLedger } from '../../src/ledger/open.js';
import { exportBundle } from '../../src/ops/export.js';
import { captureIo } from './capture-io.js';
import { tempDir } from './tmp.js';

export interface TreeFileDirs {
  /** The whole export, with directories at heads.jsonl and proofs.jsonl. */
  full: string;
  /** The export of session `s`, with a directory in place of its heads.jsonl. */
  filtered: string;
  /** The ledger's trust file (`trustPath`), and its text. */
  trustPath: string;
  trustText: string;
  /** `handoff-ledger verify DIR --trust trustPath ...more` through the CLI's `main`: its exit code and stderr. */
  verify(dir: string, ...more: string[]): Promise<{ code: number; stderr: string }>;
}

export async function treeFileDirs(): Promise<TreeFileDirs> {
  const ledger = await openLedger({ root: tempDir(), host: 'h1', onNotice: () => {} });
  const full = join(tempDir(), 'full');
  const filtered = join(tempDir(), 'filtered');
  let trustText: string;
  try {
    await ledger.publish({ principal: 'p', session: 's', run: 'r' }, { task: 't', state: 's', nextSteps: [] });
    await exportBundle(ledger, { out: full });
    await exportBundle(ledger, { out: filtered, session: 's' });
    trustText = JSON.stringify(await ledger.trustStore());
  } finally {
    await ledger.close();
  }
  const trustPath = join(tempDir(), 'keys.json');
  writeFileSync(trustPath, trustText);
  mkdirSync(join(full, 'heads.jsonl'));
  mkdirSync(join(full, 'proofs.jsonl'));
  rmSync(join(filtered, 'heads.jsonl'));
  mkdirSync(join(filtered, 'heads.jsonl'));
  const verify = async (dir: string, ...more: string[]) => {
    const c = captureIo();
    return { code: await main(['verify', dir, '--trust', trustPath, ...more], c.io), stderr: c.stderr() };
  };
  return { full, filtered, trustPath, trustText, verify };
}
