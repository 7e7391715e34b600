import { userInfo } from 'node:os';
import type { AuditActor } from '@app/audit/audit.types';

/** The person at the CLI, as the audit log names them: the operating-system user. */
export function cliActor(): AuditActor {
  let osUser = 'unknown';
  try {
    osUser = userInfo().username || osUser;
  } catch {
    // A uid with no passwd entry (some containers): the action is still recorded.
  }
  return { type: 'cli', osUser };
}
