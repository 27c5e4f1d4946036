package pgstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/planround/planround/memory"
	"github.com/planround/planround/memory/pgstore"
)

// Every process of a service opens the same database; the first one to
// arrive creates the schema, the others wait for it and then share the
// sessions.
func Example() {
	ctx := context.Background()
	st, err := pgstore.Open(ctx, "postgres://app@db.internal:5432/app?sslmode=require", pgstore.WithSchema("chat"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	s, err := st.CreateSession(ctx, memory.Session{Title: "support"})
	if err != nil {
		log.Fatal(err)
	}
	added, err := st.Append(ctx, s.ID, memory.Message{Role: memory.RoleUser, Content: "my order is late"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("message id", added[0].ID)
}
