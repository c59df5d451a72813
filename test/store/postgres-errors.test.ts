// How the PostgreSQL driver tells a lost connection (503, retried at startup) from the server's answer:
// by what the error is (pg's DatabaseError and its SQLSTATE, or a failure of the client itself), never by its text.
import t from 'tap';
import pg from 'pg';
import { isConnectionError } from '../../src/store/postgres.ts';

function serverError(code: string, message: string): pg.DatabaseError {
  const error = new pg.DatabaseError(message, message.length, 'error');
  error.code = code;
  return error;
}

t.test('the server answering: its SQLSTATE decides, whatever the message says', async (t) => {
  t.ok(isConnectionError(serverError('57P01', 'terminating connection due to administrator command')), 'shutting down');
  t.ok(isConnectionError(serverError('53300', 'sorry, too many clients already')), 'too many connections');
  t.ok(isConnectionError(serverError('08006', 'anything at all')), 'class 08');
  t.notOk(isConnectionError(serverError('23505', 'duplicate key: Connection terminated by trigger')), 'a unique violation, whatever its text');
  t.notOk(isConnectionError(serverError('25006', 'cannot execute INSERT in a read-only transaction; connection error')), 'a refused write');
});

t.test('no answer: a socket error, a timeout or a closed client, whatever its text', async (t) => {
  t.ok(isConnectionError(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' })), 'refused');
  t.ok(isConnectionError(new Error('Client was closed and is not queryable')), 'a client pg closed');
  t.ok(isConnectionError(new Error('no answer within 5000 ms')), 'no answer within DATABASE_QUERY_TIMEOUT');
  t.notOk(isConnectionError(new TypeError('Query values must be an array')), 'a programming error is not the connection');
  t.notOk(isConnectionError('a string'), 'nor what is not an Error');
});
