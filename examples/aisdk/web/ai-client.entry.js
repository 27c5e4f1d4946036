// The entry of ai-client.js, the browser build of the ai package's client
// that the page imports (build.sh makes it): only what the page uses, so
// the bundle keeps nothing else. zod-jitless.js comes first: modules run
// in the order they are imported.
import './zod-jitless.js';

export {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from 'ai';
