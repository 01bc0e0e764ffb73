// A model draws well at the size it was trained at (Model::native_size: config.json's sample_size, times the
// autoencoder's pixels per latent for SD models) and gives formless images at others: the default model,
// trained at 64x64, turns to mush at 128x128. Nothing stops a user asking for another size, so render and
// the GUI say so once, where the size is chosen.
#pragma once
#include <string>

namespace rtvd {

// "" when width x height is the model's training size; else one line for stderr or the GUI, e.g.
// "note: the model was trained at 64x64; at 128x96 it gives poor images (leave out --size for 64x64)".
std::string size_note(int native_size, int width, int height);

}  // namespace rtvd
