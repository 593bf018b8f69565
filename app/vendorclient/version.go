package vendorclient

// Version is licensor's version, sent to the vendor as User-Agent: licensor/<Version>.
const Version = "0.1.0"
