package projections

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// SetBeforeCommit installs a hook that runs inside each batch transaction
// after its rows and checkpoint are written and before the commit. Call it
// before Run, Start or CatchUp.
func (p *Projector) SetBeforeCommit(f func(ctx context.Context, tx pgx.Tx) error) {
	p.applier.beforeCommit = f
}
