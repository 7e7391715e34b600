import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'apps' })
export class AppEntity {
  @PrimaryColumn('uuid')
  id: string;

  @Column('text')
  name: string;

  /** Key of the HMAC that pseudonymises identifying user ids of this app. Never exposed. */
  @Column({ name: 'pii_secret', type: 'bytea', select: false })
  piiSecret: Buffer;

  /** IANA time zone of the app's rollup days. */
  @Column({ type: 'text', default: 'UTC' })
  timezone: string;

  /** Payload keys declared as breakdown dimensions (insights). */
  @Column({ type: 'text', array: true, default: () => "'{}'" })
  dimensions: string[];

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
