"""What every layer of the library leans on, torch-free.

:mod:`~focalcal.core.constraints` declares what each constructor parameter may hold and checks
it; :mod:`~focalcal.core.validation` checks logits, probabilities and labels;
:mod:`~focalcal.core.types` names the types public signatures use; :mod:`~focalcal.core.extras`
says which optional install brings a package; :mod:`~focalcal.core.kernels` says where the
compiled kernels live and what switches them; :mod:`~focalcal.core.pinned_numerics` pins what
picks CPU numerics by instruction set, so a run gives the same bytes on any x86-64 machine;
:mod:`~focalcal.core.spec_facts` reads what a config's loss or calibrator spec is (its γ, its
label, its role), whatever the config calls it.
"""
