// Bundles the dashboard (web/) into dist/web/: index.html, dashboard.js, dashboard.css, the icon
// and uPlot's stylesheet. Runs after `nest build`, which empties dist/ first.
import { build } from 'esbuild';
import { copyFile, mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.join(here, '..', 'dist', 'web');
const assets = path.join(out, 'assets');
const require = createRequire(import.meta.url);

await mkdir(assets, { recursive: true });
await build({
  entryPoints: [path.join(here, 'src', 'main.ts')],
  outfile: path.join(assets, 'dashboard.js'),
  bundle: true,
  format: 'esm',
  target: ['es2022'],
  minify: true,
  sourcemap: false,
  legalComments: 'none',
  logLevel: 'warning',
});
await copyFile(path.join(here, 'index.html'), path.join(out, 'index.html'));
await copyFile(path.join(here, 'dashboard.css'), path.join(assets, 'dashboard.css'));
await copyFile(path.join(here, 'favicon.svg'), path.join(assets, 'favicon.svg'));
await copyFile(require.resolve('uplot/dist/uPlot.min.css'), path.join(assets, 'uPlot.min.css'));
