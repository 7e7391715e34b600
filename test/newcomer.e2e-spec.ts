import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import request from 'supertest';
import { bearer, makeTenant, postIngest } from './factories';
import { testDatabaseUrl, useTestApp } from './support/test-app';

// What a newcomer copies from the README and the guides works as written.
const exec = promisify(execFile);
const ROOT = path.join(__dirname, '..');
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');

describe('newcomer path: the README and guides work as written', () => {
  const t = useTestApp();

  it("the README's copy-paste line puts the seed's keys into $APP_ID, $LIVE_KEY and $API_KEY", async () => {
    const line = read('README.md')
      .split('\n')
      .find((l) => l.startsWith('eval "$(node_modules/.bin/tally seed --json'));
    expect(line).toBeDefined();
    const { stdout } = await exec('bash', ['-c', `${line}\necho "$APP_ID $LIVE_KEY $API_KEY"`], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: testDatabaseUrl() },
    });
    const [appId, liveKey, apiKey] = stdout.trim().split(' ');
    expect(liveKey).toMatch(/^tly_live_/);
    expect(apiKey).toMatch(/^tly_api_/);
    const ingest = await postIngest(t.http, liveKey, {
      events: [{ eventName: 'App.opened', eventId: 'e-1', anonymousUserId: 'u-1' }],
    });
    expect(ingest.status).toBe(200);
    expect(ingest.body.accepted).toBe(1);
    const events = await request(t.http)
      .get('/api/v1/events')
      .query({ appId, limit: 10 })
      .set(bearer(apiKey));
    expect(events.status).toBe(200);
    expect(events.body.map((e: { eventId: string }) => e.eventId)).toEqual(['e-1']);
  });

  it('npm is not silenced for the whole checkout, and `npm run -s cli` prints one JSON document', async () => {
    const npmrc = fs.existsSync(path.join(ROOT, '.npmrc')) ? read('.npmrc') : '';
    expect(npmrc).not.toMatch(/loglevel\s*=\s*silent/);
    const { stdout } = await exec('npm', ['run', '-s', 'cli', '--', 'apps', 'list', '--json'], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: testDatabaseUrl() },
    });
    expect(Array.isArray(JSON.parse(stdout))).toBe(true);
  });

  it('`TALLY_HEAP_MB=512 npm start` raises the heap cap, as docs/operations.md says', async () => {
    expect(read('docs/operations.md')).toContain('TALLY_HEAP_MB=512 npm start');
    const pkg = JSON.parse(read('package.json'));
    const expand = (env: Record<string, string>) =>
      exec('sh', ['-c', `echo ${pkg.scripts.start}`], {
        env: { PATH: process.env.PATH ?? '', npm_package_config_heapMb: pkg.config.heapMb, ...env },
      });
    expect((await expand({ TALLY_HEAP_MB: '512' })).stdout).toContain('--max-old-space-size=512 ');
    expect((await expand({})).stdout).toContain(`--max-old-space-size=${pkg.config.heapMb} `);
  });

  it('`npm start` starts the old generation at heapStartMb, as docs/operations.md and the systemd unit say', async () => {
    const pkg = JSON.parse(read('package.json'));
    const flags = `--max-old-space-size=${pkg.config.heapMb} --initial-old-space-size=${pkg.config.heapStartMb}`;
    expect(pkg.config.heapStartMb).toBe('128');
    expect(read('docs/operations.md')).toContain(`\`node ${flags}\``);
    expect(read('deploy/systemd/tally.service')).toContain(`ExecStart=/usr/bin/node ${flags} `);
    const { stdout } = await exec('sh', ['-c', `echo ${pkg.scripts.start}`], {
      env: {
        PATH: process.env.PATH ?? '',
        npm_package_config_heapMb: pkg.config.heapMb,
        npm_package_config_heapStartMb: pkg.config.heapStartMb,
      },
    });
    expect(stdout).toContain(` node ${flags} dist/src/main.js`);
  });

  it('`npm start` caps glibc malloc arenas, as docs/operations.md says, unless MALLOC_ARENA_MAX is set', async () => {
    expect(read('docs/operations.md')).toContain('MALLOC_ARENA_MAX=2');
    const pkg = JSON.parse(read('package.json'));
    const expand = (env: Record<string, string>) =>
      exec('sh', ['-c', `echo ${pkg.scripts.start}`], {
        env: {
          PATH: process.env.PATH ?? '',
          npm_package_config_heapMb: pkg.config.heapMb,
          npm_package_config_mallocArenaMax: pkg.config.mallocArenaMax,
          ...env,
        },
      });
    expect(pkg.config.mallocArenaMax).toBe('2');
    expect((await expand({})).stdout).toMatch(/^MALLOC_ARENA_MAX=2 node /);
    expect((await expand({ MALLOC_ARENA_MAX: '8' })).stdout).toMatch(/^MALLOC_ARENA_MAX=8 node /);
  });

  it("docs/reads.md's encoded offset example is accepted as written", async () => {
    const example = /from=(\d{4}-\d\d-\d\dT[\d:]+%2B\d\d:\d\d)/.exec(read('docs/reads.md'));
    expect(example).not.toBeNull();
    const tenant = await makeTenant(t.app);
    const res = await request(t.http)
      .get(`/api/v1/events?appId=${tenant.appId}&from=${example![1]}`)
      .set(bearer(tenant.apiKey));
    expect(res.status).toBe(200);
    expect(res.body).toEqual([]);
  });
});
