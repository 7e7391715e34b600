import { BackupManifest, BackupRefused, checkSchema, latestSchemaVersion, tallyVersion } from './manifest';

const manifest = (schemaVersion: number): BackupManifest => ({
  createdAt: '2026-11-27T00:00:00.000Z',
  tallyVersion: '0.1.0',
  schemaVersion,
  postgresVersion: '18.4',
  format: 'physical',
  bytes: 1,
});

describe('backup manifest', () => {
  it("knows this build's schema version (its newest migration) and version", () => {
    expect(latestSchemaVersion()).toBeGreaterThanOrEqual(1763920000000);
    expect(tallyVersion()).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('accepts the same and an older schema, and refuses a newer one', () => {
    expect(() => checkSchema(manifest(latestSchemaVersion()))).not.toThrow();
    expect(() => checkSchema(manifest(1763780000000))).not.toThrow();
    expect(() => checkSchema(manifest(latestSchemaVersion() + 1))).toThrow(BackupRefused);
  });
});
