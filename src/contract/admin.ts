import Type from 'typebox';

/** Upkeep on the node answering: paused or not, and how many databases have a pass under way. */
export const UpkeepState = Type.Object({
  node: Type.String({ description: 'The node that answered (its upkeep leases are held under this id)' }),
  paused: Type.Boolean({ description: 'Whether upkeep is paused on this node: it starts no step while set' }),
  passes_under_way: Type.Integer({
    minimum: 0,
    description:
      'Databases whose upkeep pass is still running here; after a pause, a step under way (an index build) still commits when it ends',
  }),
});

export const UpkeepPauseBody = Type.Object(
  { paused: Type.Boolean({ description: 'true pauses upkeep on this node, false resumes it' }) },
  { additionalProperties: false },
);
