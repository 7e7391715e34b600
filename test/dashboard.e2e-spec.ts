import request from 'supertest';
import { useTestApp } from './support/test-app';
import { expectProblem } from './support/problem';

// The page's behaviour in a browser is covered by test/browser (Chromium); these check serving.
describe('GET /dashboard', () => {
  describe('enabled (the default)', () => {
    const t = useTestApp();

    it('serves the page with a CSP that allows only this origin and no inline code', async () => {
      const res = await request(t.http).get('/dashboard');
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(res.headers['cache-control']).toBe('no-cache');
      const csp = res.headers['content-security-policy'];
      expect(csp).toContain("default-src 'self'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("style-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toContain('unsafe');
      expect(res.headers['referrer-policy']).toBe('no-referrer');
      expect(res.text).toContain('<script type="module" src="/dashboard/assets/dashboard.js"></script>');
    });

    it.each([
      ['dashboard.js', /^text\/javascript/],
      ['dashboard.css', /^text\/css/],
      ['uPlot.min.css', /^text\/css/],
      ['favicon.svg', /^image\/svg\+xml/],
    ])('serves the asset %s', async (name, type) => {
      const res = await request(t.http).get(`/dashboard/assets/${name}`);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(type);
      expect(res.headers['content-security-policy']).toContain("default-src 'self'");
    });

    it.each(['nope.js', '..%2Fpackage.json', 'index.html'])(
      '404 not_found for the unknown asset %s',
      async (name) => {
        const res = await request(t.http).get(`/dashboard/assets/${name}`);
        expectProblem(res, 404, 'not_found');
      },
    );

    it('leaves the API CSP on the API', async () => {
      const res = await request(t.http).get('/healthz');
      expect(res.headers['content-security-policy']).toContain("default-src 'none'");
    });
  });

  describe('DASHBOARD_ENABLED=false', () => {
    const t = useTestApp({ DASHBOARD_ENABLED: 'false' });

    it.each(['/dashboard', '/dashboard/assets/dashboard.js'])('404 not_found for %s', async (path) => {
      expectProblem(await request(t.http).get(path), 404, 'not_found');
    });
  });
});
