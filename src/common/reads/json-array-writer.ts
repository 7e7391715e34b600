import type { Response } from 'express';

// Items serialized per write: the string built at once stays small whatever the answer's size.
const ITEMS_PER_CHUNK = 200;

/**
 * Sends `items` as a JSON array (200, application/json) in chunks, waiting for the socket to
 * drain between them, so that an answer is never held as one big string next to its rows.
 */
export async function writeJsonArray(res: Response, items: readonly unknown[]): Promise<void> {
  res.status(200);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  let open = '[';
  for (let i = 0; i < items.length; i += ITEMS_PER_CHUNK) {
    // The client went away: nothing more to send.
    if (res.destroyed) return;
    // One stringify per chunk (its brackets dropped) costs less than one per item and a join.
    const chunk = JSON.stringify(items.slice(i, i + ITEMS_PER_CHUNK));
    if (!res.write(open + chunk.slice(1, -1))) await drained(res);
    open = ',';
  }
  res.end(items.length === 0 ? '[]' : ']');
}

function drained(res: Response): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
