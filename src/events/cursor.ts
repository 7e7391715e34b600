// The cursor lives in common/reads, where the quarantine's listing shares it.
export { decodeCursor, encodeCursor, type CursorPosition } from '@app/common/reads/cursor';
