// tap's coverage-map: every test file counts towards the coverage of src/ (not generated types) and of nothing else.
export default function coverageMap(): string[] {
  return ['src/*.{ts,js}', 'src/!(generated)/**/*.{ts,js}'];
}
