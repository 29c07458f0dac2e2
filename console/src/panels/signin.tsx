import { useState } from 'preact/hooks';
import { ErrorNote } from '../components/error';
import { clientOf } from '../session';

/**
 * The key is tried (a database listing) before it is kept: a mistyped key is said at once, and is never stored.
 * The field is a password field, so that the browser neither shows nor offers to remember it in plain text.
 */
export function SignIn({ onSignedIn }: { onSignedIn: (key: string) => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    const trimmed = key.trim();
    setBusy(true);
    setError(undefined);
    try {
      await clientOf(trimmed).databases.list();
      onSignedIn(trimmed);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="panel signin" aria-labelledby="signin-title">
      <h1 id="signin-title">Sign in</h1>
      <form onSubmit={submit}>
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autocomplete="off"
          spellcheck={false}
          placeholder="sk_…"
          required
          value={key}
          onInput={(event) => setKey(event.currentTarget.value)}
        />
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      <ErrorNote error={error} />
      <p class="muted">
        The key stays in this tab only (its session storage) and goes to this server as the bearer header of each API
        call, never in a URL or a cookie. Signing out, or closing the tab, forgets it. Keys are made with{' '}
        <code>npx strata keys create --account NAME</code>.
      </p>
    </section>
  );
}
