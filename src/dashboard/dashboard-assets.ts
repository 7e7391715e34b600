import { Injectable, Logger } from '@nestjs/common';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export interface Asset {
  body: Buffer;
  contentType: string;
}

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** The repository root: the nearest folder above this file that holds package.json. */
function projectRoot(from: string): string {
  let dir = from;
  while (!existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) return from;
    dir = parent;
  }
  return dir;
}

/**
 * The built dashboard (dist/web, made by `npm run build`), read once at boot. Only these files
 * are served, so no request path ever reaches the file system.
 */
@Injectable()
export class DashboardAssets {
  private readonly logger = new Logger('Dashboard');
  private readonly files = new Map<string, Asset>();
  readonly page: Asset | null;

  constructor() {
    const dir = path.join(projectRoot(__dirname), 'dist', 'web');
    this.page = this.load(path.join(dir, 'index.html'));
    const assets = path.join(dir, 'assets');
    if (existsSync(assets)) {
      for (const name of readdirSync(assets)) {
        const asset = this.load(path.join(assets, name));
        if (asset) this.files.set(name, asset);
      }
    }
    if (!this.page) this.logger.warn(`dashboard not built (no ${dir}); run npm run build`);
  }

  private load(file: string): Asset | null {
    const contentType = CONTENT_TYPES[path.extname(file)];
    if (!contentType || !existsSync(file)) return null;
    return { body: readFileSync(file), contentType };
  }

  asset(name: string): Asset | null {
    return this.files.get(name) ?? null;
  }
}
