package agent_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/openaiparams"
	"github.com/planround/planround/memory"
)

func ExampleInput_images() {
	a, err := agent.New(agent.Config{Model: "gpt-4o-mini"})
	if err != nil {
		panic(err)
	}
	in := agent.Input{
		Message: "Which of these two is my cat?",
		Images: []memory.Image{
			{URL: "https://example.com/cat.jpg"},                               // the provider fetches it
			{MIMEType: "image/png", Data: []byte("\x89PNG\r\n\x1a\n\x00\x00")}, // sent as a data: URL
		},
	}
	// a.Run(ctx, in) sends them; Preview shows how, without sending.
	msgs, err := a.Preview(context.Background(), in)
	if err != nil {
		panic(err)
	}
	user := msgs[0]
	fmt.Println(user.Role, user.Content, user.Images)
	wire, _ := json.MarshalIndent(openaiparams.ToParams(msgs[:1]), "", "  ")
	fmt.Println(string(wire))

	// An image the model could not take is refused before anything is sent.
	_, err = a.Preview(context.Background(), agent.Input{Images: []memory.Image{{URL: "file:///home/me/cat.jpg"}}})
	fmt.Println(err)
	// Output:
	// user Which of these two is my cat? [https://example.com/cat.jpg image/png, 10 bytes]
	// [
	//   {
	//     "content": [
	//       {
	//         "text": "Which of these two is my cat?",
	//         "type": "text"
	//       },
	//       {
	//         "image_url": {
	//           "url": "https://example.com/cat.jpg"
	//         },
	//         "type": "image_url"
	//       },
	//       {
	//         "image_url": {
	//           "url": "data:image/png;base64,iVBORw0KGgoAAA=="
	//         },
	//         "type": "image_url"
	//       }
	//     ],
	//     "role": "user"
	//   }
	// ]
	// agent: Input.Images[0]: image URL "file:///home/me/cat.jpg": want an http, https or data URL
}
