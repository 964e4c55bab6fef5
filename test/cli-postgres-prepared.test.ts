/**
 * HANDOFF_LEDGER_POSTGRES_PREPARED through the CLI, in process: `off` sends every statement of a PostgreSQL store as
 * text (for a pooler that does not keep a connection's prepared statements), the default sends them prepared.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { captureIo } from './support/capture-io.js';
import { describePostgres, watchStatements } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';

describePostgres(
  'HANDOFF_LEDGER_POSTGRES_PREPARED',
  (pg) => {
    it('off: publish and resume send no named statement; unset: they do', async () => {
      const named: string[] = [];
      const watch = watchStatements(({ name }) => name && named.push(name));
      try {
        const dir = tempDir();
        const summary = join(dir, 'summary.json');
        writeFileSync(summary, JSON.stringify(sampleSummary('prepared')));
        // One store (root and schema), opened by each command anew.
        const store = ['--root', join(dir, 'root'), '--host', 'h1'];
        for (const value of ['off', undefined]) {
          named.length = 0;
          const env = {
            HANDOFF_LEDGER_POSTGRES: pg.connectionString,
            ...(value ? { HANDOFF_LEDGER_POSTGRES_PREPARED: value } : {}),
          };
          const scope = ['--principal', 'alice', '--session', `s-${value ?? 'default'}`];
          const published = captureIo({ env });
          expect(
            await main(['publish', ...store, ...scope, '--run', 'r', summary], published.io),
            published.stderr(),
          ).toBe(0);
          const resumed = captureIo({ env });
          expect(await main(['resume', ...store, ...scope, '--json'], resumed.io), resumed.stderr()).toBe(0);
          expect(JSON.parse(resumed.stdout()).summary.task).toBe(sampleSummary('prepared').task);
          if (value === 'off') expect(named).toEqual([]);
          else expect(named.length).toBeGreaterThan(0);
        }
      } finally {
        watch.stop();
      }
    });
  },
  'hl_cli_prepared',
);
