// ESLint 9 flat config: JavaScript Standard style (neostandard) with TypeScript, formatting included
// (@stylistic rules), so `npm run lint:fix` also formats. No type-aware rules: the whole run stays fast.
import neostandard from 'neostandard'

export default [
  {
    ignores: ['dist/**', 'node_modules/**', 'data/**', '.bench/**', '.artifacts/**', 'test/fixtures/**']
  },
  ...neostandard({ ts: true, env: ['mocha'] }),
  {
    rules: {
      // Long option objects and the OpenAPI tables pack related properties on one line on purpose.
      '@stylistic/object-property-newline': 'off',
      // Chained conditions read as a table: `a ? x\n : b ? y\n : z`.
      '@stylistic/multiline-ternary': 'off',
      // A TypeBox schema and its Static type share one name by design; tsc catches real redeclarations.
      '@typescript-eslint/no-redeclare': 'off',
      // `void promise()` as a statement marks a promise deliberately not awaited (its errors handled inside).
      'no-void': ['error', { allowAsStatement: true }],
      // Some checks match control characters on purpose, to refuse them in names and headers.
      'no-control-regex': 'off',
      // `for (const key in object) return …` reads the first key without allocating an array.
      'no-unreachable-loop': ['error', { ignore: ['ForInStatement'] }],
      // uPlot is the chart library's own constructor name.
      'new-cap': ['error', { newIsCap: true, capIsNew: false, properties: true, newIsCapExceptions: ['uPlot'] }],
      // A closing tag lines up with the line that opened it (`cond && <p>…\n</p>`), as jsx-indent wants.
      '@stylistic/jsx-closing-tag-location': ['error', 'line-aligned'],
      // Panel handlers are action objects' methods (`save.run`), not `handleX` functions.
      'react/jsx-handler-names': 'off'
    }
  },
  {
    files: ['test/**'],
    rules: {
      // chai's property assertions (`expect(x).to.be.true`, `.that.is.not.empty`) are expressions.
      '@typescript-eslint/no-unused-expressions': 'off'
    }
  }
]
