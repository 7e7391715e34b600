#!/usr/bin/env node
// `tally` in a checkout: npm links it as node_modules/.bin/tally, so it starts the built admin
// CLI directly, with no npm or npx in between. `npm ci` builds (its prepare step), or `npm run build`.
const path = require('node:path');

const main = path.resolve(__dirname, '..', '..', '..', 'dist', 'src', 'cli', 'main.js');
let runCli;
try {
  ({ runCli } = require(main));
} catch (err) {
  if (err && err.code === 'MODULE_NOT_FOUND' && String(err.message).includes(main)) {
    process.stderr.write('tally: the CLI is not built yet; run `npm run build` in the checkout\n');
    process.exit(1);
  }
  throw err;
}
void runCli(process.argv.slice(2)).then((code) => process.exit(code));
