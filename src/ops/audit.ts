/** `verifyBundle` with a `verify` span and metrics: the offline audit as the Node CLI and Node hosts run it. */
import type { BundleReader } from '../../manifests/audit/bundle.js';
import {
  BUNDLE_FIELDS,
  verifyBundleAs,
  type AuditOptionNames,
  type BundleAuditReport,
  type VerifyBundleOptions,
} from '../../manifests/audit/verify-chain.js';
import { readOptionFieldsAs } from '../../store/errors.js';
import { auditUsage } from '../../manifests/audit/errors.js';
import { LedgerTelemetry, type TelemetryOptions } from '../telemetry/telemetry.js';

/**
 * Audits a bundle exactly as `verifyBundle` does and records it: span `handoff_ledger.verify` with the
 * verdict and counts. Findings are a result, not a failure: the outcome is `ok` whenever the audit ran.
 * @throws whatever `verifyBundle` throws (AuditError `BUNDLE_IO`, …)
 */
export async function auditBundle(
  reader: BundleReader,
  options: VerifyBundleOptions & { telemetry?: TelemetryOptions | LedgerTelemetry | undefined },
): Promise<BundleAuditReport> {
  return auditBundleAs(reader, options, { since: 'since' });
}

/** `auditBundle`, its refusals naming the options as `names` says (`verify` gives its `--since`). */
export async function auditBundleAs(
  reader: BundleReader,
  options: VerifyBundleOptions & { telemetry?: TelemetryOptions | LedgerTelemetry | undefined },
  names: AuditOptionNames,
): Promise<BundleAuditReport> {
  // No options, or options that cannot be read: verifyBundle's own USAGE, not a TypeError of the destructuring here.
  if (typeof options !== 'object' || options === null)
    throw auditUsage('auditBundle needs options naming the pinned trust store: { trust }');
  // Each field read once (a getter that throws, or a name it does not know: USAGE naming it); verifyBundle gets the
  // fields as read.
  const { telemetry, ...verifyOptions } = readOptionFieldsAs(
    options,
    [...BUNDLE_FIELDS, 'telemetry'],
    'auditBundle options',
    auditUsage,
  ) as VerifyBundleOptions & { telemetry?: TelemetryOptions | LedgerTelemetry };
  const t = telemetry instanceof LedgerTelemetry ? telemetry : new LedgerTelemetry(telemetry);
  return t.run(
    'verify',
    {},
    () => verifyBundleAs(reader, verifyOptions, names),
    (r) => ({
      attributes: {
        'handoff_ledger.verdict_ok': r.ok,
        'handoff_ledger.manifests': r.counts.manifests,
        'handoff_ledger.chains': r.counts.chains,
        'handoff_ledger.findings': r.counts.findings,
        'handoff_ledger.blobs_checked': r.counts.blobsChecked,
      },
    }),
  );
}
