import { useState } from 'preact/hooks';

/**
 * Text to copy, in a block that can also be selected by hand: the clipboard API needs a secure context, which a
 * server reached over plain HTTP on another address is not.
 */
export function CopyBlock({ label, text }: { label: string; text: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setCopied(true);
      setTimeout(() => setCopied(false), 1500);
    } catch {
      setCopied(false);
    }
  };
  return (
    <div class="copy-block">
      <div class="copy-head">
        <span>{label}</span>
        <button type="button" onClick={() => void copy()}>
          {copied ? 'Copied' : `Copy ${label}`}
        </button>
      </div>
      <pre data-copy={label}>{text}</pre>
    </div>
  );
}
