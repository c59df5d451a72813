import neostandard from 'neostandard';
import tseslint from 'typescript-eslint';

// neostandard's rules without its style (the code keeps semicolons), plus typescript-eslint's recommended set.
export default [
  { ignores: ['src/generated/', 'packages/client/src/openapi.ts', 'packages/client/src/int64-fields.ts', '**/dist/', 'coverage/', '.tap/', 'data/'] },
  ...neostandard({ ts: true, noStyle: true, noJsx: true, env: ['node'] }),
  ...tseslint.configs.recommended.map((config) => ({ ...config, files: ['**/*.ts'] })),
];
