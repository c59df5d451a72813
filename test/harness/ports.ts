// Free TCP ports on 127.0.0.1, for the processes the harness starts on a port it must name in advance.
import { createServer, type AddressInfo } from 'node:net';

/** A port the kernel just handed out on 127.0.0.1: free now, for the caller to bind right after. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
