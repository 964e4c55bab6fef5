// Lint rules that keep the architecture: no import cycles, and imports that point down only
// (src → manifests → store). Style is prettier's job (npm run format), not eslint's.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';

// The auditor's page (web/) runs the isomorphic core in a browser: it may import manifests/ and store/, never src/.
const webZone = {
  target: './web',
  from: ['./src'],
  message: 'web/ may import only the isomorphic layers (manifests/, store/).',
};

// What ships (the three layers and the auditor's page) never imports the tests or the benchmarks: neither is in the
// package, and a helper of theirs would not be held to the layers' rules.
const shippedZone = {
  target: ['./src', './manifests', './store', './web'],
  from: ['./test', './benchmarks'],
  message: 'src/, manifests/, store/ and web/ may not import test/ or benchmarks/ (neither ships).',
};

const layer = (from, allowed) => ({
  target: `./${from}`,
  from: ['./store', './manifests', './src'].filter((l) => l !== `./${from}` && !allowed.includes(l)),
  message: `${from}/ may import only from layers below it (src → manifests → store).`,
});

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'benchmarks/results/**', '**/*.d.mts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts', '**/*.mjs', '**/*.js'],
    plugins: { 'import-x': importX },
    languageOptions: { globals: { ...globals.node } },
    settings: {
      ...importX.flatConfigs.typescript.settings,
      'import-x/resolver-next': [
        createNodeResolver({ extensions: ['.ts', '.js'], extensionAlias: { '.js': ['.ts', '.js'] } }),
      ],
    },
    rules: {
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'import-x/no-restricted-paths': [
        'error',
        { zones: [layer('store', []), layer('manifests', ['./store']), webZone, shippedZone] },
      ],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      'no-control-regex': 'off',
      // Hot loops write their cursor once more at a break; not worth a rewrite of measured code.
      'no-useless-assignment': 'off',
      'preserve-caught-error': 'off',
      'no-empty': ['error', { allowEmptyCatch: true }],
    },
  },
  {
    files: ['web/**/*.ts'],
    languageOptions: { globals: { ...globals.browser } },
  },
);
