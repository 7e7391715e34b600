import { isConnectionError, isRecoveryConflict } from './transient-error';

const pgError = (code: string, message: string) => Object.assign(new Error(message), { code });

describe('isConnectionError', () => {
  it.each([
    ['a refused connection', pgError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5433')],
    [
      'a fast shutdown of the server',
      pgError('57P01', 'terminating connection due to administrator command'),
    ],
    ['a server starting up', pgError('57P03', 'the database system is starting up')],
    ['a connection failure', pgError('08006', 'connection failure')],
    ['a socket closed under a query', new Error('Connection terminated unexpectedly')],
    ['a pool that could not connect in time', new Error('timeout exceeded when trying to connect')],
  ])('is true for %s', (_name, err) => {
    expect(isConnectionError(err)).toBe(true);
  });

  it.each([
    ['a statement timeout', pgError('57014', 'canceling statement due to statement timeout')],
    ['a recovery conflict', pgError('40001', 'canceling statement due to conflict with recovery')],
    ['a syntax error', pgError('42601', 'syntax error')],
    ['a missing partition', new Error('no partition of relation "events" found for row')],
  ])('is false for %s', (_name, err) => {
    expect(isConnectionError(err)).toBe(false);
  });
});

describe('isRecoveryConflict', () => {
  it('is true for a statement a standby cancelled during replay, false for a serialization failure', () => {
    expect(isRecoveryConflict(pgError('40001', 'canceling statement due to conflict with recovery'))).toBe(
      true,
    );
    expect(isRecoveryConflict(pgError('40P01', 'canceling statement due to conflict with recovery'))).toBe(
      true,
    );
    expect(isRecoveryConflict(pgError('40001', 'could not serialize access'))).toBe(false);
  });
});
