import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { UpkeepPauseBody, UpkeepState } from '../../contract/admin.js';
import { errorReplies } from '../../contract/common.js';

const errors = errorReplies();
const tags = ['Admin'];

/** How long a pause waits for the passes under way to end before it answers. */
const PAUSE_WAIT_MS = 30_000;

/** The node's own operations, under its admin key (docs/api.md, Admin): each acts on the node that answers. */
export const adminRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { ctx } = app;
  const state = ({ paused, passesUnderWay }: { paused: boolean; passesUnderWay: number }) => ({
    node: ctx.nodeId,
    paused,
    passes_under_way: passesUnderWay,
  });

  app.get(
    '/v1/admin/upkeep',
    {
      schema: {
        tags,
        security: [{ admin_key: [] }],
        summary: "Whether upkeep is paused on this node (the node's admin key)",
        response: { 200: UpkeepState, ...errors },
      },
    },
    async () => state(ctx.workers.upkeepState()),
  );

  app.put(
    '/v1/admin/upkeep',
    {
      schema: {
        tags,
        security: [{ admin_key: [] }],
        summary:
          "Pause or resume upkeep on this node (the node's admin key); a pause waits up to 30 s for passes under way",
        body: UpkeepPauseBody,
        response: { 200: UpkeepState, ...errors },
      },
    },
    async (req) => state(await ctx.workers.pauseUpkeep(req.body.paused, PAUSE_WAIT_MS)),
  );
};
