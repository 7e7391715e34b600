import { forgetKey, get, KeyInfo, storeKey } from './api';
import { clearMessage, Dashboard, fail, showMessage } from './dashboard';
import { startLive, stopLive } from './live';

function fillAppPicker(d: Dashboard, key: KeyInfo): void {
  d.ui.app.replaceChildren(
    ...key.apps.map((a) => {
      const option = document.createElement('option');
      option.value = a.id;
      option.textContent = a.name;
      return option;
    }),
  );
}

/** Tries `key` with GET /api/v1/key; on success shows the board of the key's first app. */
export async function signIn(d: Dashboard, key: string): Promise<void> {
  const { ui, state } = d;
  storeKey(key);
  try {
    state.key = await get<KeyInfo>('/api/v1/key');
  } catch (err) {
    forgetKey();
    state.key = null;
    fail(d, err);
    ui.keyInput.focus();
    return;
  }
  clearMessage(d);
  ui.keyInput.value = '';
  ui.signIn.hidden = true;
  ui.board.hidden = false;
  ui.signOut.hidden = false;
  ui.keyLabel.hidden = false;
  ui.keyLabel.textContent = `${state.key.prefix} · ${state.key.scopes.join(', ')}`;
  fillAppPicker(d, state.key);
  if (state.key.apps.length === 0) {
    showMessage(d, 'This key grants access to no app that still exists. Issue a key for an app.');
    return;
  }
  await d.loadRollups();
  startLive(d);
}

/** Forgets the key, stops the reads and shows the sign-in form again. */
export function signOut(d: Dashboard): void {
  const { ui, state } = d;
  forgetKey();
  stopLive(d);
  window.clearTimeout(state.retryTimer);
  state.key = null;
  state.rollups = [];
  state.filters = {};
  ui.board.hidden = true;
  ui.signOut.hidden = true;
  ui.keyLabel.hidden = true;
  ui.signIn.hidden = false;
  ui.refresh.disabled = false;
  ui.rows.tBodies[0].replaceChildren();
  ui.live.tBodies[0].replaceChildren();
  ui.breakdown.tBodies[0].replaceChildren();
  showMessage(d, 'Signed out. The key was removed from this tab.', 'info');
  ui.keyInput.focus();
}
