import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

export type KeyKind = 'ingest' | 'api';
export type IngestMode = 'live' | 'test';
export { KNOWN_SCOPES, type Scope } from './scopes';

@Entity({ name: 'keys' })
export class KeyEntity {
  @PrimaryColumn('uuid')
  id: string;

  @Column('text')
  kind: KeyKind;

  @Column({ type: 'text', nullable: true })
  mode: IngestMode | null;

  @Column({ type: 'text', nullable: true })
  name: string | null;

  @Column({ name: 'app_ids', type: 'uuid', array: true })
  appIds: string[];

  @Column({ type: 'text', array: true })
  scopes: string[];

  @Column({ name: 'key_hash', type: 'bytea', select: false })
  keyHash: Buffer;

  @Column({ name: 'key_last4', type: 'text' })
  keyLast4: string;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'last_used_at', type: 'timestamptz', nullable: true })
  lastUsedAt: Date | null;

  @Column({ name: 'expires_at', type: 'timestamptz', nullable: true })
  expiresAt: Date | null;

  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true })
  revokedAt: Date | null;
}
