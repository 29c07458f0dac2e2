import type { SearchExplain } from '@strata/client';
import { duration } from '../format';
import { READ_WORDS } from '../health';

/** One leg's part of a row's explain (docs/api.md, Explain). */
interface RowLeg {
  rank: number | null;
  score?: number | null;
  distance?: number | null;
  contribution: number;
  found: string | null;
}

const FOUND_WORDS: Readonly<Record<string, string>> = {
  index: 'in the index',
  fresh: 'among rows written since the last upkeep (fresh, in memory)',
  scan: 'by a scan (no index yet)',
  index_or_scan: 'in the index or the rows outside it',
};

function legOf(value: unknown): RowLeg | null {
  return typeof value === 'object' && value !== null && 'contribution' in value ? (value as RowLeg) : null;
}

/** Why a row ranked where it did: each leg's rank, measure, share of `_score` and where it was found. */
export function ExplainLegs({ row }: { row: Record<string, unknown> }) {
  const explain = row._explain;
  if (typeof explain !== 'object' || explain === null) return null;
  const legs = explain as Record<string, unknown>;
  const entries = (['text', 'vector'] as const).map((name) => [name, legOf(legs[name])] as const);
  return (
    <div class="grid-wrap">
      <table class="grid explain-row">
        <caption>Why it ranked here: _score {String(row._score)} is the sum of the legs' contributions</caption>
        <thead>
          <tr>
            <th scope="col">Leg</th>
            <th scope="col">Rank</th>
            <th scope="col">BM25 / distance</th>
            <th scope="col">Contribution</th>
            <th scope="col">Found</th>
          </tr>
        </thead>
        <tbody>
          {entries.map(([name, leg]) => (
            <tr key={name} data-leg={name}>
              <td>{name}</td>
              {leg === null ? (
                <td colSpan={4} class="muted">
                  did not run
                </td>
              ) : (
                <>
                  <td class="num">{leg.rank ?? 'not returned'}</td>
                  <td class="num">{String(leg.score ?? leg.distance ?? '')}</td>
                  <td class="num">{leg.contribution.toPrecision(4)}</td>
                  <td>{leg.found === null ? '' : (FOUND_WORDS[leg.found] ?? leg.found)}</td>
                </>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** What each leg of the search did as a whole. */
export function ExplainSummary({ explain }: { explain: SearchExplain }) {
  const legs = Object.entries(explain.legs);
  return (
    <div class="grid-wrap">
      <table class="grid explain-summary">
        <caption>
          Explain: version {explain.version}, rrf_k {explain.rrf_k}
        </caption>
        <thead>
          <tr>
            <th scope="col">Leg</th>
            <th scope="col">Read</th>
            <th scope="col">Time</th>
            <th scope="col">Candidates</th>
            <th scope="col">Outside index</th>
            <th scope="col">Weight</th>
          </tr>
        </thead>
        <tbody>
          {legs.map(([name, leg]) => (
            <tr key={name}>
              <td>{name}</td>
              <td>{READ_WORDS[leg.read] ?? leg.read}</td>
              <td class="num">{duration(leg.ms)}</td>
              <td class="num">{leg.candidates}</td>
              <td class="num">{leg.outside_index}</td>
              <td class="num">{leg.weight}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
