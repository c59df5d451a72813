// What /proc says of a process, for the bench scripts: its CPU time and its memory.
import { readFileSync } from 'node:fs';

/** User plus system CPU time of a process, all its threads, in µs (clock ticks of 10 ms). */
export function cpuMicroseconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** The process's resident memory now (VmRSS) or at its peak (VmHWM), in MB. */
export function memoryMb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024;
}
