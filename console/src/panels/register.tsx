import type { DatabaseSummary, StorageBinding, Strata } from '@strata/client';
import { useState } from 'preact/hooks';
import { ErrorNote } from '../components/error';

interface Fields {
  name: string;
  provider: 'local' | 's3';
  bucket: string;
  prefix: string;
  region: string;
  endpoint: string;
  roleArn: string;
  requesterPays: boolean;
}

const EMPTY: Fields = {
  name: '',
  provider: 'local',
  bucket: '',
  prefix: '',
  region: '',
  endpoint: '',
  roleArn: '',
  requesterPays: false,
};

/** Only the fields the user filled: the server's defaults stand for the rest, and `local` takes no S3 field. */
function bindingOf(fields: Fields): StorageBinding {
  const given = (value: string) => (value.trim() === '' ? undefined : value.trim());
  if (fields.provider === 'local')
    return { provider: 'local', bucket: fields.bucket.trim(), prefix: given(fields.prefix) };
  return {
    provider: 's3',
    bucket: fields.bucket.trim(),
    prefix: given(fields.prefix),
    region: given(fields.region),
    endpoint: given(fields.endpoint),
    role_arn: given(fields.roleArn),
    requester_pays: fields.requesterPays ? true : undefined,
  };
}

export function RegisterForm({
  strata,
  onRegistered,
}: {
  strata: Strata;
  onRegistered: (registered: DatabaseSummary) => void;
}) {
  const [fields, setFields] = useState(EMPTY);
  const [error, setError] = useState<unknown>(undefined);
  const [done, setDone] = useState<DatabaseSummary | undefined>(undefined);
  const set = <K extends keyof Fields>(name: K, value: Fields[K]) => setFields({ ...fields, [name]: value });
  const text = (name: 'name' | 'bucket' | 'prefix' | 'region' | 'endpoint' | 'roleArn', label: string, hint = '') => (
    <div class="field">
      <label for={`register-${name}`}>{label}</label>
      <input
        id={`register-${name}`}
        autocomplete="off"
        spellcheck={false}
        placeholder={hint}
        value={fields[name]}
        onInput={(event) => set(name, event.currentTarget.value)}
      />
    </div>
  );
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    setDone(undefined);
    try {
      const registered = await strata.databases.create({ name: fields.name.trim(), storage: bindingOf(fields) });
      setDone(registered);
      setFields(EMPTY);
      onRegistered(registered);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form class="register" onSubmit={submit} aria-labelledby="register-title">
      <h2 id="register-title">Register a database</h2>
      <div class="fields">
        {text('name', 'Name', 'shop')}
        <div class="field">
          <label for="register-provider">Storage</label>
          <select
            id="register-provider"
            value={fields.provider}
            onChange={(event) => set('provider', event.currentTarget.value === 's3' ? 's3' : 'local')}
          >
            <option value="local">Local folder on the server</option>
            <option value="s3">S3 or S3-compatible bucket</option>
          </select>
        </div>
        {text('bucket', fields.provider === 'local' ? 'Folder (under the data dir’s buckets/)' : 'Bucket', 'shop')}
        {text('prefix', 'Prefix (optional)')}
        {fields.provider === 's3' ? (
          <>
            {text('region', 'Region', 'us-east-1')}
            {text('endpoint', 'Endpoint (S3-compatible stores)', 'https://…')}
            {text('roleArn', 'Role ARN to assume', 'arn:aws:iam::123456789012:role/strata')}
            <label class="check">
              <input
                type="checkbox"
                checked={fields.requesterPays}
                onChange={(event) => set('requesterPays', event.currentTarget.checked)}
              />{' '}
              Requester pays
            </label>
          </>
        ) : null}
      </div>
      <button type="submit">Register</button>
      <ErrorNote error={error} />
      {done === undefined ? null : (
        <p class="ok" role="status">
          Registered {done.name} ({done.state}). Verify it to start using it
          {done.external_id === '' ? '' : `; a role it assumes must trust external id ${done.external_id}`}.
        </p>
      )}
    </form>
  );
}
