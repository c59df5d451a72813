// Raw HTTP/1.1 for tests over real sockets: write bytes as they are, read back every complete
// response (Content-Length or chunked framing), and tell who closed the connection.
import { connect, type Socket } from 'node:net';

/** The shape of light-my-request's responses (statusCode), so contractProblems takes either. */
export interface RawResponse {
  statusCode: number;
  /** Header names in lower case. */
  headers: Record<string, string>;
  body: string;
}

export interface RawConnection {
  socket: Socket;
  /** Every complete response received so far, in order. */
  responses: RawResponse[];
  /** The n-th response (from 0); rejects when the connection closes before it is complete. */
  response: (n: number) => Promise<RawResponse>;
  /** Settles once the socket is closed; byServer is false only when this side destroyed it. */
  closed: Promise<{ byServer: boolean }>;
  /** Destroys the socket from this side. */
  destroy: () => void;
}

export async function openRaw(port: number): Promise<RawConnection> {
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  let pending: Buffer = Buffer.alloc(0);
  let destroyedHere = false;
  let isClosed = false;
  const responses: RawResponse[] = [];
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const waiter of [...waiters]) waiter();
  };
  socket.on('data', (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    for (let parsed = takeResponse(pending); parsed; parsed = takeResponse(pending)) {
      responses.push(parsed.response);
      pending = parsed.rest;
    }
    notify();
  });
  socket.on('error', () => undefined); // a reset by the server is a close like any other here
  const closed = new Promise<{ byServer: boolean }>((resolve) =>
    socket.once('close', () => {
      isClosed = true;
      notify();
      resolve({ byServer: !destroyedHere });
    }),
  );
  return {
    socket,
    responses,
    closed,
    response: (n) =>
      new Promise<RawResponse>((resolve, reject) => {
        const check = () => {
          if (responses.length > n) {
            waiters.delete(check);
            resolve(responses[n]!);
          } else if (isClosed) {
            waiters.delete(check);
            reject(new Error(`the connection closed after ${responses.length} responses; unparsed: ${JSON.stringify(pending.toString())}`));
          }
        };
        waiters.add(check);
        check();
      }),
    destroy: () => {
      destroyedHere = true;
      socket.destroy();
    },
  };
}

/** One complete response from the front of `data` (Content-Length or chunked framing), or undefined. */
export function takeResponse(data: Buffer): { response: RawResponse; rest: Buffer } | undefined {
  const end = data.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [statusLine, ...lines] = data.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/\d\.\d (\d{3})/.exec(statusLine!)?.[1]);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const bodyStart = end + 4;
  if (headers['transfer-encoding'] === 'chunked') {
    const chunked = takeChunks(data, bodyStart);
    return chunked && { response: { statusCode: status, headers, body: chunked.body.toString('utf8') }, rest: data.subarray(chunked.end) };
  }
  const length = Number(headers['content-length'] ?? 0);
  if (data.length < bodyStart + length) return undefined;
  return {
    response: { statusCode: status, headers, body: data.subarray(bodyStart, bodyStart + length).toString('utf8') },
    rest: data.subarray(bodyStart + length),
  };
}

/** A chunked body (RFC 9112 §7.1, no trailers) from `at`, and where it ends, or undefined until the last chunk has arrived. */
function takeChunks(data: Buffer, at: number): { body: Buffer; end: number } | undefined {
  const chunks: Buffer[] = [];
  for (;;) {
    const lineEnd = data.indexOf('\r\n', at);
    if (lineEnd < 0) return undefined;
    const size = parseInt(data.toString('latin1', at, lineEnd), 16);
    const chunkEnd = lineEnd + 2 + size;
    if (data.length < chunkEnd + 2) return undefined;
    if (size === 0) return { body: Buffer.concat(chunks), end: chunkEnd + 2 };
    chunks.push(data.subarray(lineEnd + 2, chunkEnd));
    at = chunkEnd + 2;
  }
}

/** Sends raw bytes on a new connection, half-closes it, and answers everything the server wrote until it closed. */
export function rawExchange(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.end(request));
    let received = '';
    socket.on('data', (chunk) => (received += chunk.toString()));
    socket.on('close', () => resolve(received));
    socket.on('error', reject);
  });
}

/** The complete HTTP answers in what a raw socket received, in order. */
export function rawResponses(received: string): RawResponse[] {
  const responses: RawResponse[] = [];
  let rest: Buffer = Buffer.from(received);
  for (let parsed = takeResponse(rest); parsed && rest.toString('latin1', 0, 5) === 'HTTP/'; parsed = takeResponse(rest)) {
    responses.push(parsed.response);
    rest = parsed.rest;
  }
  return responses;
}

/** Connects and answers the error code, or "connected" when the connection was accepted. */
export function tryConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}
