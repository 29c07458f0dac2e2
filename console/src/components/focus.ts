import type { RefObject } from 'preact';
import { useEffect, useRef } from 'preact/hooks';

/**
 * A ref whose element takes the focus once shown: a confirmation that opens below the list is where the keyboard
 * goes next, and the browser scrolls it into view. (The `autofocus` attribute does nothing after the page loaded.)
 */
export function useFocusOnShow<T extends HTMLElement>(): RefObject<T | null> {
  const ref = useRef<T>(null);
  useEffect(() => ref.current?.focus(), []);
  return ref;
}
