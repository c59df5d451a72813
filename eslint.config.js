import neostandard from 'neostandard';
import tseslint from 'typescript-eslint';

// neostandard's rules without its style (the code keeps semicolons), plus typescript-eslint's recommended set.
export default [
  // The fixture is V8 natives syntax (%DebugPrint), which no JavaScript parser reads.
  { ignores: ['src/generated/', 'packages/client/src/openapi.ts', 'packages/client/src/int64-fields.ts', '**/dist/', 'coverage/', '.tap/', 'data/', 'test/fixtures/next-tick-feedback.mjs'] },
  ...neostandard({ ts: true, noStyle: true, noJsx: true, env: ['node'] }),
  ...tseslint.configs.recommended.map((config) => ({ ...config, files: ['**/*.ts'] })),
];
