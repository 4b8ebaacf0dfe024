package embedded_test

import (
	"context"
	"fmt"
	"log"

	"github.com/relock-go/relock/embedded"
)

// Start gives a ready relock client on an in-process Redis: no server to install.
func ExampleStart() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	err = srv.Client().Lock("demo").Do(context.Background(), func(ctx context.Context) error {
		fmt.Println("inside the lock")
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// inside the lock
	// err: <nil>
}
