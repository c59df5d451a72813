// A file another process is still writing (a server's stdout sent to a file), read on from where the last read ended.
import { openSync, readSync } from 'node:fs';

/** Calls `each` with every whole line `file` has gained since the last call; bytes as Latin-1, exact for ASCII lines. */
export function linesAdded(file: string): (each: (line: string) => void) => void {
  const fd = openSync(file, 'r');
  const chunk = Buffer.alloc(1 << 20);
  let partial = '';
  return (each) => {
    for (let read = readSync(fd, chunk); read > 0; read = readSync(fd, chunk)) {
      const lines = (partial + chunk.toString('latin1', 0, read)).split('\n');
      partial = lines.pop()!;
      lines.forEach((line) => each(line));
    }
  };
}
